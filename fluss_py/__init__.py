"""fluss_py: a replicated, partitioned log store. Importing any part of it first picks gRPC core's I/O engine
(``fluss_py.grpc_env``), which gRPC reads when it is first imported."""

from fluss_py import grpc_env as _grpc_env

_grpc_env.apply()
