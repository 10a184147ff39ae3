"""A usage sample that mypy --strict checks against the shipped stubs (tests/python/test_typing.py); it
also runs, so the stubs cannot drift from what the package does."""

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

import samebits


def continuation(lm: samebits.SambaInference, prompt: str) -> str:
    text: str = lm.generate(prompt, 16, temperature=0.7, top_k=40, top_p=0.95, min_p=0.05,
                            repetition_penalty=1.1, seed=1, stop=["\n\n"])
    return text


def pieces(lm: samebits.SambaInference) -> list[str]:
    stream: Iterator[str] = lm.generate("And God said", 8, seed=2, stream=True)
    return list(stream)


def ids(lm: samebits.SambaInference) -> list[int]:
    out: list[int] = lm.generate([65, 110, 100], 4, temperature=0.0)
    raw: bytes = lm.generate(b"And", 4, seed=3)
    return out + list(raw)


def decode(lm: samebits.SambaInference) -> npt.NDArray[np.float32]:
    state: samebits.SambaState = lm.allocate_state(1, 32)
    lm.forward(np.array([[65, 110, 100]]), state)
    fork: samebits.SambaState = state.copy()
    a = lm.step(np.array([32]), state)
    b = lm.step(np.array([32]), fork)
    assert a.tobytes() == b.tobytes()
    other: samebits.SambaState = lm.allocate_state(1, 32)
    both = lm.step_many(np.array([101, 32]), [state, other])
    assert both.shape == (2, lm.config.vocab)
    return a


def main() -> None:
    path = samebits.default_model_path()
    lm = samebits.default_model()
    assert path.is_file() and lm.config.vocab == 256
    print(continuation(lm, "In the beginning"), pieces(lm), ids(lm), decode(lm).shape)
    samebits.set_num_threads(1)
    threads: int = samebits.get_num_threads()
    assert threads == 1


if __name__ == "__main__":
    main()
