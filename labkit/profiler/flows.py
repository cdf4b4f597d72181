"""Which events of a profile are linked by a message: each ``send`` and the ``recv`` that took
its value, and the profile's recorded ``flows`` (a parameter-server push and the apply that used
it). The timeline draws them as arrows; the Chrome trace exports them as flow events."""
import re

_TRAILING_NUMBER = re.compile(r"_\d+$")


def transfer_pairs(events):
    """``[(send event, recv event)]``: each recv with the send of the same rendezvous name and
    step (node names ``send_X`` / ``recv_X``; a numbered ``recv_X_2`` falls back to ``X``)."""
    sends = {}
    for e in events:
        if e.op == "send":
            key = e.name[5:] if e.name.startswith("send_") else e.name
            sends.setdefault((key, e.step), e)
    pairs = []
    for e in events:
        if e.op != "recv":
            continue
        key = e.name[5:] if e.name.startswith("recv_") else e.name
        s = sends.get((key, e.step)) or sends.get((_TRAILING_NUMBER.sub("", key), e.step))
        if s is not None:
            pairs.append((s, e))
    return pairs


def arrows(prof, events=None):
    """The message arrows among ``events`` (default: all of ``prof``'s): each send and its recv
    (``transfer_pairs``), and the profile's ``flows`` whose two events are both among them."""
    events = prof.events if events is None else events
    drawn = {id(e) for e in events}
    return transfer_pairs(events) + [(a, b) for a, b in getattr(prof, "flows", ())
                                     if id(a) in drawn and id(b) in drawn]
