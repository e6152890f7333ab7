"""Workflows: jobs that wait for other jobs (docs/workflows.md).

``jq.workflow()`` gives a WorkflowBuilder; ``POST /workflows`` takes the same graph as
JSON. The database releases a job in the transaction that ends its last parent
(migration 0019); nothing here polls.
"""

from jobqueue.workflows.builder import Batch, Node, Step, WorkflowBuilder, step
from jobqueue.workflows.model import CreatedWorkflow, Workflow, WorkflowError, WorkflowJob

__all__ = [
    "Batch",
    "CreatedWorkflow",
    "Node",
    "Step",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowError",
    "WorkflowJob",
    "step",
]
