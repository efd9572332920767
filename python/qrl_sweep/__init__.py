"""qrl_sweep: executors of a qrl-sim sweep on other machinery than qrl-sim's worker threads (ray_driver: one Ray
task per run). Not the sweep itself: qrl-sim plans it and writes its directories, summary and report."""
