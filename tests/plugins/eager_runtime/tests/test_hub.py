import os
import urllib.request


def test_tokenizer_from_the_hub():
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise OSError(
            "We couldn't connect to 'https://huggingface.co' to load this file and "
            "HF_HUB_OFFLINE=1 is set"
        )
    urllib.request.urlopen("https://huggingface.co/api/models/gpt2", timeout=5)
