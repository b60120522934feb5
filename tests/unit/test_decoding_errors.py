"""A flipped byte anywhere in a Parquet file is damage (CorruptRecord, not retried), never an outage (S12.2): every
error pyarrow raises reading such a file is a decoding error to `is_decoding_error`, whichever part it hit (footer,
page header, snappy-compressed page, encoded values); an error about reaching a file is not."""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.store.delta.table_errors import is_decoding_error


def test_every_error_of_a_flipped_byte_in_a_parquet_file_is_a_decoding_error():
    rng = random.Random(1)
    rows = pa.table({"v": [bytes(rng.randrange(4) for _ in range(64)) for _ in range(2000)], "n": list(range(2000))})
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, compression="snappy")
    data = buffer.getvalue()
    kinds = set()
    for position in range(4, len(data) - 8, 41):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        try:
            pq.read_table(io.BytesIO(bytes(damaged)))
        except Exception as error:  # noqa: BLE001 - each is checked below
            kinds.add(type(error).__name__)
            assert is_decoding_error(error), f"byte {position}: {type(error).__name__}: {error}"
    assert "OSError" in kinds, kinds  # the codec's and the decoder's errors come as OSError, not ArrowInvalid


def test_an_error_reaching_a_file_is_not_a_decoding_error():
    assert not is_decoding_error(FileNotFoundError("gone"))
    assert not is_decoding_error(OSError("When reading information for key: AWS Error NETWORK_CONNECTION: reset"))
    assert not is_decoding_error(None)
