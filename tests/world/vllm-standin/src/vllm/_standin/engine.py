"""The stand-in engine core: sizes the KV cache from config.json + argv, allocates the CPU
offload region through vLLM's own module, and keeps the counters /metrics reports."""
import hashlib
import math
import os
import threading
import uuid

from vllm.logger import init_logger

logger = init_logger("vllm.v1.engine.core")
_DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "float32": 4}


class EngineCoreDied(Exception):
    """The engine core process ended by a signal; args[0] = {proc name: exit code}."""


class Engine:
    def __init__(self, args, config, weight_bytes):
        self.args = args
        self.engine_id = str(uuid.uuid4())
        text = config.get("text_config", config)
        self.text_config = text
        self.max_position = int(text.get("max_position_embeddings", 4096))
        layers = int(text.get("num_hidden_layers", 1))
        types = text.get("layer_types")
        if types:
            self.full_layers = sum(1 for t in types if t == "full_attention")
        else:
            self.full_layers = layers // int(text.get("full_attention_interval", 1))
        self.hybrid = self.full_layers < layers
        self.full_layers += int(text.get("mtp_num_hidden_layers", 0) or 0)
        tp = args.tensor_parallel_size or 1
        self.tp = tp
        kv_heads = max(1, int(text.get("num_key_value_heads", 1)) // tp)
        head_dim = int(text.get("head_dim") or
                       int(text.get("hidden_size", 128)) // int(text.get("num_attention_heads", 1)))
        dtype = args.kv_cache_dtype or "auto"
        dbytes = 1 if dtype.startswith("fp8") else _DTYPE_BYTES.get(dtype, 2)
        self.block_size = args.block_size or 16
        self.page_bytes = self.block_size * kv_heads * head_dim * 2 * dbytes * self.full_layers
        pool = args.kv_cache_memory_bytes or int(float(
            os.environ.get("VLLM_STANDIN_KV_CACHE_GIB", "11.1")) * 2**30)
        self.num_gpu_blocks = args.num_gpu_blocks_override or pool // self.page_bytes
        self.kv_tokens = self.num_gpu_blocks * self.block_size
        mml = args.max_model_len
        if mml in (None, -1):
            mml = self.max_position
        elif mml > self.max_position and os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
            raise ValueError(
                "User-specified max_model_len (%d) is greater than the derived max_model_len "
                "(max_position_embeddings=%d in model's config.json). To allow overriding this "
                "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1." % (mml, self.max_position))
        self.max_model_len = mml
        if args.enable_prefix_caching is None:
            self.prefix_caching = not self.hybrid
        else:
            self.prefix_caching = bool(args.enable_prefix_caching)
        spec = args.speculative_config or {}
        self.num_spec = int(spec.get("num_speculative_tokens", 0)) if spec else 0
        self.offload_gib = args.kv_offloading_size
        self.offload_backend = args.kv_offloading_backend or "native"
        self.regions = []
        self.lock = threading.Lock()
        self.seen_blocks = set()
        self.counters = {k: 0 for k in (
            "prefix_cache_queries", "prefix_cache_hits", "num_preemptions",
            "prompt_tokens", "generation_tokens", "request_success", "spec_decode_num_drafts",
            "spec_decode_num_draft_tokens", "spec_decode_num_accepted_tokens")}
        self.accepted_per_pos = [0] * self.num_spec
        logger.info("Model loading took %.4f GiB memory", weight_bytes / 2**30)

    def start(self):
        """What EngineCore does before the API server binds its port."""
        if self.max_model_len > self.kv_tokens:
            raise ValueError(
                "To serve at least one request with the models's max seq len (%d), (%.2f GiB KV "
                "cache is needed, which is larger than the available KV cache memory (%.2f GiB). "
                "Based on the available memory, the estimated maximum model length is %d. Try "
                "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                "initializing the engine." % (
                    self.max_model_len, self.max_model_len / self.block_size * self.page_bytes / 2**30,
                    self.num_gpu_blocks * self.page_bytes / 2**30, self.kv_tokens))
        logger.info("GPU KV cache size: %d tokens", self.kv_tokens)
        if self.offload_gib and self.offload_gib > 0 and self.offload_backend == "native":
            self._allocate_offload()

    def _allocate_offload(self):
        # vllm/v1/kv_offload/cpu/spec.py: one SharedOffloadRegion per worker rank, same file.
        from vllm._standin import kernel
        from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
        cpu_page_size = 2 << 20
        row = cpu_page_size * self.tp
        num_blocks = int(self.offload_gib * 2**30) // row
        shm_free = kernel.shm_free_bytes("/dev/shm/x")
        for rank in range(self.tp):
            self.regions.append(SharedOffloadRegion(
                engine_id=self.engine_id, num_blocks=num_blocks, rank=rank,
                kv_bytes_per_block=row, cpu_page_size=cpu_page_size))
        if num_blocks * row > shm_free:
            # Not populated up front (patched code on an old kernel): the first KV write past the
            # tmpfs limit faults and the EngineCore process dies of SIGBUS (exit code -7).
            import sys
            sys.stderr.write("Fatal Python error: Bus error\n\n")
            sys.stderr.flush()
            raise EngineCoreDied({"EngineCore_DP0": -7})
        self.num_cpu_blocks = num_blocks

    def shutdown(self):
        for region in self.regions:
            region.cleanup()
        self.regions = []

    def record(self, prompt, completion_tokens):
        """Account one finished request: prefix-cache lookups by full block, spec decode."""
        tokens = prompt.split()
        with self.lock:
            c = self.counters
            c["request_success"] += 1
            c["prompt_tokens"] += len(tokens)
            c["generation_tokens"] += completion_tokens
            if self.prefix_caching:
                c["prefix_cache_queries"] += len(tokens)
                h = hashlib.sha256()
                for b in range(len(tokens) // self.block_size):
                    h.update(" ".join(tokens[b * self.block_size:(b + 1) * self.block_size]).encode())
                    key = h.hexdigest()
                    if key not in self.seen_blocks:
                        self.seen_blocks.add(key)
                        break
                    c["prefix_cache_hits"] += self.block_size
            if self.num_spec:
                drafts = math.ceil(completion_tokens / (self.num_spec + 1))
                c["spec_decode_num_drafts"] += drafts
                c["spec_decode_num_draft_tokens"] += drafts * self.num_spec
                for pos in range(self.num_spec):
                    accepted = drafts * (self.num_spec - pos) // (self.num_spec + 1)
                    self.accepted_per_pos[pos] += accepted
                    c["spec_decode_num_accepted_tokens"] += accepted

    def cache_config_labels(self):
        # CacheConfig.metrics_info(): every field of vllm/config/cache.py, str()-ed, in order.
        a = self.args
        return [
            ("block_size", self.block_size),
            ("user_specified_block_size", getattr(a, "block_size", None) is not None),
            ("user_specified_mamba_block_size", getattr(a, "mamba_block_size", None) is not None),
            ("prefix_match_unit", getattr(a, "prefix_match_unit", None)),
            ("gpu_memory_utilization", getattr(a, "gpu_memory_utilization", None)),
            ("cache_dtype", getattr(a, "kv_cache_dtype", None)),
            ("is_attention_free", False),
            ("num_gpu_blocks_override", getattr(a, "num_gpu_blocks_override", None)),
            ("sliding_window", None),
            ("enable_prefix_caching", self.prefix_caching),
            ("prefix_caching_hash_algo", getattr(a, "prefix_caching_hash_algo", None)),
            ("calculate_kv_scales", getattr(a, "calculate_kv_scales", None)),
            ("kv_cache_dtype_skip_layers", getattr(a, "kv_cache_dtype_skip_layers", None) or []),
            ("mamba_page_size_padded", None),
            ("skip_page_size_padded", None),
            ("mamba_block_size", getattr(a, "mamba_block_size", None)),
            ("mamba_cache_dtype", getattr(a, "mamba_cache_dtype", None)),
            ("mamba_ssm_cache_dtype", getattr(a, "mamba_ssm_cache_dtype", None)),
            ("mamba_cache_mode", getattr(a, "mamba_cache_mode", None)),
            ("num_gpu_blocks", self.num_gpu_blocks),
            ("num_cpu_blocks", getattr(self, "num_cpu_blocks", None)),
            ("kv_cache_size_tokens", self.kv_tokens),
            ("kv_cache_max_concurrency", round(self.kv_tokens / self.max_model_len, 2)),
            ("kv_sharing_fast_prefill", getattr(a, "kv_sharing_fast_prefill", None)),
            ("kv_cache_memory_bytes", getattr(a, "kv_cache_memory_bytes", None)),
            ("kv_offloading_size", getattr(a, "kv_offloading_size", None)),
            ("kv_offloading_backend", self.offload_backend),
        ]
