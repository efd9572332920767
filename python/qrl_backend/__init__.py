"""qrl_backend: the Python side of qrl-backend/1, the protocol through which qrl-sim drives a policy
backend in another process. Message codec (wire), server runner (stdio and HTTP) and the Backend base
class a GPU stack fills in. Not a model: the toy AR references live in numpy_ar and torch_ar, the
masked-diffusion one in numpy_diffusion (its record: diffusion_record).

Only numpy is required; the transports use the standard library.
"""

from .wire import (
    PROTOCOL,
    ProtocolError,
    RpcError,
    decode_tensor,
    encode_tensor,
    read_safetensors,
    write_safetensors,
)
from .wire import RolloutBatch, TopkLogprobs, batch_from_json, batch_to_json
from .backend import BACKWARD_KEYWORDS, GENERATE_KEYWORDS, LOGPROBS_KEYWORDS, WARM_START_KEYWORDS, Backend, ConfiguredFromRun, LogprobsResult, SftExamples, StepResult
from .diffusion_record import DiffusionEngineRecord, DiffusionSequence, diffusion_record
from .server import serve, serve_stdio, serve_http, handle_message

__all__ = [
    "PROTOCOL",
    "ProtocolError",
    "RpcError",
    "decode_tensor",
    "encode_tensor",
    "read_safetensors",
    "write_safetensors",
    "Backend",
    "ConfiguredFromRun",
    "RolloutBatch",
    "TopkLogprobs",
    "BACKWARD_KEYWORDS",
    "GENERATE_KEYWORDS",
    "LOGPROBS_KEYWORDS",
    "WARM_START_KEYWORDS",
    "LogprobsResult",
    "SftExamples",
    "StepResult",
    "batch_from_json",
    "batch_to_json",
    "DiffusionEngineRecord",
    "DiffusionSequence",
    "diffusion_record",
    "serve",
    "serve_stdio",
    "serve_http",
    "handle_message",
]
