import numpy as np

from advisor.measure.crossing import fcfs_transfers


def test_fcfs_transfers_take_out_the_wait():
    # three transfers of 2 s asked for at 0, 1 and 10: the second waits 1 s behind the first
    req = np.array([0.0, 1.0, 10.0])
    link = np.array([2.0, 3.0, 2.0])  # link seconds: wait + transfer
    assert np.allclose(fcfs_transfers(req, link), [2.0, 2.0, 2.0])
