import vendor_sdk.torch

DEVICE = vendor_sdk.torch.device("vendor")
