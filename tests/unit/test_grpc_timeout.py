"""gRPC's grpc-timeout header: at most 8 digits, in the finest unit that holds the deadline."""

from knee.clientspec import grpc_timeout


def test_a_deadline_is_written_in_the_finest_unit_that_fits_8_digits() -> None:
    assert grpc_timeout(0.5) == "500m"
    assert grpc_timeout(0.0001) == "1m"
    assert grpc_timeout(99_999.999) == "99999999m"
    assert grpc_timeout(100_000) == "100000S"
    assert grpc_timeout(200_000_000) == "3333333M"
