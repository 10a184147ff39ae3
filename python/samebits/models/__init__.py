"""samebits.models: models over Hugging Face checkpoint directories; today the byte-level BPE Tokenizer."""

from ._tokenizer import Tokenizer, TokenStreamDecoder

__all__ = ["Tokenizer", "TokenStreamDecoder"]
