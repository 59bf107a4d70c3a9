"""Where CI expects the AArch64 tools (`.ci/run` sets ACCPY_REQUIRE_AARCH64=1 when it can apt-get
them), their absence is a failure, not a row of skipped tests."""
import os

import pytest

from accpy.targets.arm import AARCH64_TOOLCHAIN


def test_the_aarch64_tools_are_present_where_required():
    if os.environ.get("ACCPY_REQUIRE_AARCH64") != "1":
        pytest.skip("ACCPY_REQUIRE_AARCH64 is not set: the AArch64 tests may skip without their tools")
    why = AARCH64_TOOLCHAIN.missing() or AARCH64_TOOLCHAIN.cannot_run()
    assert why is None, f"AArch64 tools required here but: {why}"
