import os

# Test and bench processes use gRPC and then start server processes with a preexec_fn (PR_SET_PDEATHSIG),
# i.e. a real fork(). With gRPC's fork support on, its event engine restarts a poller thread in the child,
# which dies on EBADF once Popen(close_fds=True) closes the epoll fd before exec (grpc/grpc#43055): ~4% of
# started servers aborted (exit -6). Must be set before gRPC initialises, hence here (imported first).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
