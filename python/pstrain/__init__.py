"""PSTrain's orchestrator: job files, the ps-train command and a Python API.

    import pstrain
    job = pstrain.Job.from_yaml("configs/fmnist_lenet.yaml", {"solver_overrides.max_iter": 500})
    result = job.run(quiet=True)    # prints nothing; a new folder if runs/<name> exists
    print(result.summary["final_test_accuracy"], result.snapshot)

Jobs can also be built in code (JobConfig, ClusterConfig, ...), driven step by
step from Python with caffe.Solver's interface (DistributedSolver), and single
processes started by hand with start_server / start_worker.
"""
__version__ = "0.1.0"   # keep equal to pyproject.toml's [project] version

from .compare import compare
from .distributed import DistributedSolver, StepResult
from .config import (ClusterConfig, ConsistencyConfig, DataConfig, JobConfig, RestartConfig,
                     SecurityConfig, StragglerConfig, TransportConfig)
from .errors import JobError, ProgramNotFound
from .launcher import ProcessHandle, start_server, start_worker
from .programs import find_program
from .runner import Job, RunResult

__all__ = ["ClusterConfig", "ConsistencyConfig", "DataConfig", "DistributedSolver", "Job",
           "JobConfig", "JobError", "StepResult",
           "ProcessHandle", "ProgramNotFound", "RestartConfig", "RunResult", "SecurityConfig", "StragglerConfig",
           "TransportConfig", "__version__", "compare", "find_program", "start_server",
           "start_worker"]
