"""The audio receive buffer: each Opus packet goes on the moment it is next in sequence; loss, reordering, duplicates,
wrap-around and jumps neither stall it nor leave lasting delay."""

from __future__ import annotations

import pytest
from aiortc.rtp import RtpPacket

from server.transports.webrtc_media import NextPacketBuffer


def handed_on(sequence: list[int]) -> list[int | None]:
    """What the buffer hands on after each packet arrives, by sequence number (None: nothing yet)."""
    buffer, out = NextPacketBuffer(), []
    for seq in sequence:
        packet = RtpPacket(sequence_number=seq % 65536, timestamp=seq * 960 % 2**32)
        packet._data = seq.to_bytes(4, "big")
        pli, frame = buffer.add(packet)
        assert pli is False
        out.append(None if frame is None else int.from_bytes(frame.data, "big"))
    return out


@pytest.mark.parametrize(
    ("arrivals", "expected"),
    [
        ([1, 2, 3, 4], [1, 2, 3, 4]),  # in order: no packet waits for the next one
        ([65534, 65535, 65536, 65537], [65534, 65535, 65536, 65537]),  # across the 16-bit wrap
        ([1, 2, 4, 5, 6, 7], [1, 2, None, 4, 5, 6]),  # 3 lost: given up after two later packets, one frame behind
        ([1, 3, 2, 4, 5], [1, None, 2, 3, 4]),  # 3 before 2: both played, in order
        ([1, 2, 3, 2, 1, 4], [1, 2, 3, None, None, 4]),  # duplicates and late packets dropped
        ([1, 2, 500, 501], [1, 2, 500, 501]),  # a jump past the buffer: start again there
    ],
)
def test_next_packet_buffer(arrivals, expected):
    assert handed_on(arrivals) == expected


def test_delay_after_a_burst_of_reordering_stays_bounded():
    arrivals = [1, 3, 2, 5, 4, 7, 6, 9, 8, 10, 11, 12]
    out = handed_on(arrivals)
    assert [x for x in out if x is not None] == sorted(x for x in out if x is not None)
    assert out[-1] >= arrivals[-1] - 1, "at most one frame behind the newest packet"
