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


def test_S12_2_every_byte_of_a_data_file_lakelog_wrote_flipped_is_damage_to_the_file_io_layer(tmp_path):
    """Every byte of a partition's data file, one at a time, read back as the log reads it (page checksums on): the
    read succeeds (the table's own checks judge those rows) or fails as damage, never as an outage or a raw error."""
    import glob

    from lakelog import Producer
    from lakelog.errors import KafkaStorageError
    from lakelog.log import create_topic
    from lakelog.store import Location, initialise_root

    root = str(tmp_path / "lake")
    initialise_root(root)
    create_topic(root, "t", 1)
    producer = Producer({"lakelog.root": root})
    for i in range(20):
        producer.produce("t", key=f"k{i}", value=f"value-{i}" * 3, headers={"h": b"x"}, partition=0)
    producer.flush()
    (written,) = glob.glob(f"{root}/topics/t/0/*.parquet")
    data = open(written, "rb").read()
    io_layer, damaged_uri = Location.of(root).io, str(tmp_path / "damaged.parquet")
    outages = []
    for position in range(len(data)):
        damaged = bytearray(data)
        damaged[position] ^= 0xFF
        with open(damaged_uri, "wb") as handle:
            handle.write(damaged)
        try:
            io_layer.read_parquet(damaged_uri, None, None)
        except pa.ArrowException:
            pass  # ArrowInvalid, CorruptPage: the table makes them CorruptRecord
        except KafkaStorageError as error:
            if not is_decoding_error(error.__cause__):
                outages.append((position, str(error.__cause__)))
        except Exception as error:  # noqa: BLE001 - a raw error is the failure this test looks for
            outages.append((position, f"{type(error).__name__}: {error}"))
    assert outages == [], f"{len(outages)} of {len(data)} flips read as an outage or a raw error, e.g. {outages[:5]}"
