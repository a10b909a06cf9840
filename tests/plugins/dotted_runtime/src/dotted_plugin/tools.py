import vendor_sdk_tools

TOOLS = vendor_sdk_tools
