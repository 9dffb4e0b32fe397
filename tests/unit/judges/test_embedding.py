"""The packaged all-MiniLM-L6-v2, run offline, gives the model's reference similarities."""

from __future__ import annotations

import logging
import sys
import threading

import numpy as np
import pytest

from collector.judges.embedding import blas, encoder, install_commands, similarity

# sentence-transformers' documented similarities for all-MiniLM-L6-v2 on these sentences.
SENTENCES = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
REFERENCE = [[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]]


def test_the_reference_similarity_matrix() -> None:
    vectors = encoder().encode(SENTENCES)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors @ vectors.T, REFERENCE, atol=1e-3)


def test_padding_does_not_change_an_embedding() -> None:
    alone = encoder().encode(["He drove to the stadium."])[0]
    beside_a_long_one = encoder().encode(["He drove to the stadium.", "word " * 300])[0]
    assert np.allclose(alone, beside_a_long_one, atol=1e-5)


def test_paraphrases_are_closer_than_other_answers() -> None:
    expected = "Your parcel left the depot and arrives today."
    assert similarity(expected, "The parcel is on its way and will be delivered today.") > 0.6
    assert similarity(expected, "I cannot help with that request.") < 0.3
    assert similarity(expected, expected) == pytest.approx(1.0, abs=1e-5)


def test_a_comparison_runs_on_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    model = encoder()
    seen: list[int] = []
    original = model.encode

    def encode(texts: list[str]) -> np.ndarray:
        seen.extend(
            p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"
        )
        return original(texts)

    monkeypatch.setattr(model, "encode", encode)
    similarity("Your parcel left the depot.", "The parcel is on its way.")
    assert seen and set(seen) == {1}


def test_overlapping_comparisons_keep_one_blas_thread_and_restore_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads() -> list[int]:
        info = threadpoolctl.threadpool_info()
        return [p["num_threads"] for p in info if p["user_api"] == "blas"]

    model = encoder()
    original = model.encode
    first_in, second_in, first_done = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.extend(blas_threads())
        if texts[0] == "first":
            first_in.set()
            second_in.wait(1)  # the second comparison starts while this one runs, if it may
        else:
            second_in.set()
            first_done.wait(1)  # the first one finishes while this one runs, if it may
            seen.extend(blas_threads())
        return original(texts)

    monkeypatch.setattr(model, "encode", encode)

    def first() -> None:
        similarity("first", "a")
        first_done.set()

    before = set(blas_threads())
    if before == {1}:
        pytest.skip("BLAS runs one thread here already")
    a = threading.Thread(target=first)
    a.start()
    assert first_in.wait(10)
    b = threading.Thread(target=similarity, args=("second", "b"))
    b.start()
    a.join(10)
    b.join(10)
    assert seen and set(seen) == {1}
    assert set(blas_threads()) == before  # the process's own setting is back


def test_without_threadpoolctl_the_warning_gives_commands_that_work(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import fails
    with caplog.at_level(logging.WARNING):
        assert blas.__wrapped__() is None
    assert install_commands() in caplog.text
