"""Random streams of a population: row k of every draw is what a single run's generator with
member k's seed draws, in the same order; members that do not draw keep their stream; a
checkpointed state restores every stream."""

import torch

from ttt_research.env.streams import Streams, inverse_cdf, sample, uniform


def test_each_row_is_its_own_generators_draw_in_order():
    streams = Streams([3, 7, 11])
    singles = [torch.Generator().manual_seed(s) for s in (3, 7, 11)]
    a, b, c = streams.rand(5, 9), streams.randint(4, 6), streams.randperm([5, 3, 4])
    for k, g in enumerate(singles):
        assert torch.equal(a[k], torch.rand((5, 9), generator=g))
        assert torch.equal(b[k], torch.randint(4, (6,), generator=g))
        assert torch.equal(c[k, :[5, 3, 4][k]], torch.randperm([5, 3, 4][k], generator=g))


def test_members_that_do_not_draw_keep_their_stream():
    streams = Streams([1, 2])
    first = streams.rand(4, members=torch.tensor([True, False]))
    assert torch.equal(first[1], torch.zeros(4))
    again = streams.rand(4)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    torch.rand(4, generator=g1)
    assert torch.equal(again[0], torch.rand(4, generator=g1))
    assert torch.equal(again[1], torch.rand(4, generator=g2))  # member 1's first draw


def test_sample_through_streams_is_each_members_single_sample():
    logits = torch.randn(2, 16, 9)
    streams = Streams([5, 6])
    drawn = sample(logits, streams, temperature=torch.tensor([0.5, 2.0]).view(2, 1, 1))
    for k, (seed, t) in enumerate(((5, 0.5), (6, 2.0))):
        assert torch.equal(drawn[k], sample(logits[k], torch.Generator().manual_seed(seed), t))


def test_a_saved_state_restores_every_stream():
    streams = Streams([0, 1, 2])
    streams.rand(10)
    state = streams.get_state()
    expected = streams.rand(3)
    fresh = Streams([9, 9, 9])
    fresh.set_state(state)  # rows of one stacked tensor: views at an offset, copied first
    assert torch.equal(fresh.rand(3), expected)
    one = Streams([4])
    one.set_state(torch.Generator().manual_seed(4).get_state())  # a single run's older state
    assert torch.equal(one.rand(2)[0], torch.rand(2, generator=torch.Generator().manual_seed(4)))
    assert uniform((2,), torch.device("cpu"), torch.Generator().manual_seed(0)).shape == (2,)


def test_inverse_cdf_draws_each_cell_at_its_probability_and_never_a_masked_one():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.25, 0.0, 0.0, 0.125, 0.125, 0.0],
                          [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]])
    cdf = probs.cumsum(-1)
    u = torch.rand(2, 200_000, generator=torch.Generator().manual_seed(0))
    cells = inverse_cdf(cdf[:, None, :].expand(2, 200_000, 9), u)  # (2, 200000)
    share = torch.stack([torch.bincount(c, minlength=9) for c in cells]).float() / 200_000
    assert torch.allclose(share, probs, atol=0.005)
    assert (share[probs == 0] == 0).all()
    # The ends: u = 0 takes the first cell of positive probability, and a u that rounds up
    # to the row's total (here: a total short of 1) still lands on its last positive cell.
    short = torch.tensor([0.0, 0.3, 0.3, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6])
    assert inverse_cdf(short, torch.tensor(0.0)).item() == 1
    assert inverse_cdf(short, torch.tensor(1.0)).item() == 3
