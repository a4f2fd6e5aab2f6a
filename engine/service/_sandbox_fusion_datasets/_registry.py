"""Which class judges a dataset: SandboxFusion's registry of the classes served here."""

from __future__ import annotations

from a2e_engine.engine.service._sandbox_fusion_datasets._autoeval import AUTOEVAL
from a2e_engine.engine.service._sandbox_fusion_datasets._base import DatasetType, OJError
from a2e_engine.engine.service._sandbox_fusion_datasets._common_oj import COMMON_OJ
from a2e_engine.engine.service._sandbox_fusion_datasets._cruxeval import CRUXEVAL
from a2e_engine.engine.service._sandbox_fusion_datasets._function_tests import HUMANEVAL, MULTIPLE
from a2e_engine.engine.service._sandbox_fusion_datasets._live_code_bench import LIVE_CODE_BENCH
from a2e_engine.engine.service._sandbox_fusion_datasets._mbpp import MBPP
from a2e_engine.engine.service._sandbox_fusion_datasets._mbxp import MBXP
from a2e_engine.engine.service._sandbox_fusion_oj_types import TestConfig

__all__ = ["DATASET_TYPES", "dataset_type_of"]

DATASET_TYPES: dict[str, DatasetType] = {
    kind.name: kind
    for kind in [COMMON_OJ, MULTIPLE, HUMANEVAL, MBPP, MBXP, CRUXEVAL, AUTOEVAL, LIVE_CODE_BENCH]
}


def dataset_type_of(dataset: str, config: TestConfig) -> DatasetType:
    """A registered dataset id's class, else ``config.dataset_type``'s, as SandboxFusion picks."""
    for kind in DATASET_TYPES.values():
        if dataset in kind.dataset_ids:
            return kind
    if config.dataset_type is None:
        raise OJError(400, f"no eval class found for dataset {dataset}")
    named = next(
        (k for k in DATASET_TYPES.values() if config.dataset_type in (k.name, *k.aliases)), None
    )
    if named is None:
        served = ", ".join(DATASET_TYPES)
        raise OJError(400, f"eval class {config.dataset_type} not found (served: {served})")
    return named
