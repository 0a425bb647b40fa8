"""Front ends that run other loaders' pipelines (NVIDIA DALI) on fastload's own machinery."""
