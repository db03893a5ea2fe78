"""Test helpers for code built on mslk (skip decorators keyed on the device)."""

from mslk.testing.device import (  # noqa: F401
    skipUnlessCuda,
    skipUnlessCudaCapability,
    skipUnlessCudaVersion,
    skipUnlessGfxArch,
    skipUnlessRocm,
)
