"""Per-test seeding for the kernel tests.

Every run draws fresh random inputs: a run seed (KERNEL_TEST_SEED, or a random one when
unset) is mixed with the test id (which includes its parameters), so cases never share data
and each failure message names the KERNEL_TEST_SEED that reproduces it.
"""

import os
import secrets
import zlib

import pytest
import torch

os.environ.setdefault("KERNEL_TEST_SEED", str(secrets.randbits(31)))


@pytest.fixture
def seed(request) -> int:
    base = int(os.environ["KERNEL_TEST_SEED"])
    return zlib.crc32(request.node.nodeid.encode()) ^ base


@pytest.fixture
def gen(seed) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
