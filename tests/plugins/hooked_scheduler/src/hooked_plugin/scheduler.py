from vllm.v1.core.sched.scheduler import Scheduler


class HookedScheduler(Scheduler):
    """Upstream's scheduler under the plugin's name (the hook's settings are the point)."""
