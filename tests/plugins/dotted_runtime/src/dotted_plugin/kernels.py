from vendor_sdk import torch

KERNELS = torch.kernels()
