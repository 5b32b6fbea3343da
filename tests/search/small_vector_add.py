"""A small vector_add for search tests: the builtin task's reference and baseline on (512, 1024), one hidden shape.

Evaluations are several times cheaper than on the builtin shape, and the demo kernel's 12
tunable settings still differ (narrow tiles are DMA-overhead bound).
"""

from pathlib import Path

from nkiagent import tasks
from nkiagent.tasks.builtin.vector_add import TASK as FULL
from nkiagent.tasks.spec import Task

TASK = Task(
    name="vector_add_small",
    description=FULL.description,
    inputs=FULL.inputs,
    output=FULL.output,
    reference=FULL.reference,
    dims={"N": 512, "D": 1024},
    hidden_dims=[{"N": 256, "D": 512}],
    tolerance=FULL.tolerance,
    constraints=FULL.constraints,
    vector_elems=FULL.vector_elems,
    baseline=str(Path(tasks.__file__).resolve().parent / "builtin" / "baselines" / "vector_add.py"),
)
