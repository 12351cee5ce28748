"""Fixtures shared by the test modules."""

import pytest


@pytest.fixture
def count_fits(monkeypatch):
    """``count_fits(cls)`` starts counting the calls of ``cls.fit`` (clones included) and returns
    the list they are recorded in (one entry, the filter's class, a call), until the test's
    ``monkeypatch`` is undone."""

    def start(cls):
        calls = []
        fit = cls.fit

        def counted(self, *args, **kwargs):
            calls.append(type(self))
            return fit(self, *args, **kwargs)

        monkeypatch.setattr(cls, "fit", counted)
        return calls

    return start
