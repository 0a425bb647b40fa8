"""Property-based attacks on the loader's resume state: any field removed, retyped or set out of range is
refused at load naming the field, and a refused load changes nothing; what is accepted resumes within the
epoch (never an empty or repeated epoch of a state that was tampered with)."""

import copy

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastload
from fastload.schedule import STATE_FIELDS

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DATA = torch.utils.data.TensorDataset(torch.arange(24))


def _loader(**kwargs):
    return fastload.DataLoader(DATA, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(3),
                               **kwargs)


def _saved(after: int = 2) -> dict:
    loader = _loader()
    iterator = iter(loader)
    for _ in range(after):
        next(iterator)
    state = loader.state_dict()
    list(iterator)
    return state


SAVED = _saved()


def _batches(loader):
    return [batch[0].tolist() for batch in loader]


def _reference_rest():
    loader = _loader()
    loader.load_state_dict(copy.deepcopy(SAVED))
    return _batches(loader)


REST = _reference_rest()

# values that are wrong for most fields, and some that are right for some
ODD = st.sampled_from([None, "no", "1", 2.5, float("nan"), -1, -2, 0, 10**9, 2**64, True, False, [], {}, [1, 2],
                       {"generator": [0]}, [[0, 3]], [[1, -1]], b"\x00"])


def _untouched(loader) -> None:
    """A refused load left the loader as it was: its next epoch is a whole, fresh one."""
    fresh = _loader()
    assert loader.state_dict() == fresh.state_dict()
    assert _batches(loader) == _batches(fresh)


@SETTINGS
@given(field=st.sampled_from(sorted(STATE_FIELDS)))
def test_a_missing_field_is_refused_by_name_and_changes_nothing(field):
    state = copy.deepcopy(SAVED)
    del state[field]
    loader = _loader()
    with pytest.raises(ValueError, match=repr(field)):
        loader.load_state_dict(state)
    _untouched(loader)


@SETTINGS
@given(field=st.sampled_from(sorted(STATE_FIELDS)), value=ODD)
def test_a_changed_field_is_refused_by_name_or_resumes_within_the_epoch(field, value):
    state = copy.deepcopy(SAVED)
    state[field] = value
    loader = _loader()
    try:
        loader.load_state_dict(state)
    except ValueError as error:
        assert repr(field) in str(error) or field in str(error), error
        _untouched(loader)
        return
    rest = _batches(loader)  # accepted: a well-formed position, never more batches than the epoch holds
    assert len(rest) <= len(loader)
    assert all(len(batch) == 4 for batch in rest)


@pytest.mark.parametrize("field, value", [("world_size", 0), ("world_size", -2), ("batches", 10**9),
                                          ("finished", "no"), ("epoch", -1), ("seed", "7"), ("rng", {"x": []}),
                                          ("segments", [[0, 1]]), ("fingerprint", []), ("version", 2),
                                          ("batches", 7)])
def test_tampered_states_are_refused_naming_the_field(field, value):
    state = copy.deepcopy(SAVED)
    state[field] = value
    loader = _loader()
    with pytest.raises(ValueError, match=field):
        loader.load_state_dict(state)
    _untouched(loader)


def test_an_unknown_field_or_a_non_dict_is_refused():
    with pytest.raises(ValueError, match="'extra'"):
        _loader().load_state_dict({**SAVED, "extra": 1})
    with pytest.raises(ValueError, match="a dict"):
        _loader().load_state_dict([("epoch", 0)])


def test_a_refused_fingerprint_changes_nothing():
    """The fingerprint is checked after the fields but before anything is applied."""
    loader = fastload.DataLoader(DATA, batch_size=4, shuffle=False)
    with pytest.raises(ValueError, match="shuffle"):
        loader.load_state_dict(copy.deepcopy(SAVED))
    assert _batches(loader) == [list(range(i, i + 4)) for i in range(0, 24, 4)]


def test_the_untampered_state_resumes_the_rest_of_the_epoch():
    assert len(REST) == 6 - 2 and all(len(batch) == 4 for batch in REST)


class _Counting(torch.utils.data.IterableDataset):
    def __init__(self, count):
        self.count = count

    def __iter__(self):
        return iter(range(self.count))


def test_an_iterable_replayed_past_its_end_is_an_error_not_an_empty_epoch():
    """A plain IterableDataset resumes by replaying the delivered batches: if it ends before them, the
    state was not saved over this dataset."""
    loader = fastload.DataLoader(_Counting(12), batch_size=4)
    iterator = iter(loader)
    next(iterator), next(iterator)
    state = loader.state_dict()
    short = fastload.DataLoader(_Counting(4), batch_size=4)
    short.load_state_dict(state)
    with pytest.raises(ValueError, match="2 batches .* delivered.*gave only 1"):
        iter(short)
