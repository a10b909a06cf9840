from vllm.platforms.interface import Platform, PlatformEnum


class HookedPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "hooked"
    device_type = "cpu"

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        scheduler_config = vllm_config.scheduler_config
        scheduler_config.max_num_seqs = min(scheduler_config.max_num_seqs, 4)
        scheduler_config.scheduler_cls = "hooked_plugin.scheduler.HookedScheduler"
