"""Leader resources start in order and stop in reverse order, also after a failed start."""

import pytest

from fluss_py.coordinator.leader import ResourceStack


async def test_reverse_teardown_after_a_failure_in_the_middle():
    events = []

    def step(name, fail=False):
        async def start():
            if fail:
                raise RuntimeError(f"{name} failed")
            events.append(f"start {name}")

        async def stop():
            events.append(f"stop {name}")

        return start, stop

    stack = ResourceStack()
    for name in ("rpc-channels", "channel-manager"):
        await stack.push(name, *step(name))
    with pytest.raises(RuntimeError):
        await stack.push("background-managers", *step("background-managers", fail=True))
    assert stack.names == ["rpc-channels", "channel-manager"]
    await stack.close()
    assert events == ["start rpc-channels", "start channel-manager", "stop channel-manager", "stop rpc-channels"]
    assert stack.names == []


async def test_a_failing_stop_does_not_keep_the_others_running():
    stopped = []

    async def bad_stop():
        raise RuntimeError("boom")

    async def good_stop():
        stopped.append("a")

    stack = ResourceStack()
    await stack.push("a", None, good_stop)
    await stack.push("b", None, bad_stop)
    await stack.close()
    assert stopped == ["a"]
