"""Per-member optimisers on stacked parameters: each member moves exactly as its own network
would under torch's SGD / Adam at its own learning rate, and a stopped member not at all."""

import pytest
import torch

from ttt_research.models import member_optim
from ttt_research.models.member_optim import MemberAdam, MemberSGD
from ttt_research.models.nets import MLP, MLPStack

LRS = [0.5, 0.05, 0.005]


def views(seed: int, b: int = 64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, (b, 9), generator=g).float()


def member_loss(logits: torch.Tensor) -> torch.Tensor:
    """(..., B, 9) logits -> a loss per member (summed over members: grads stay separate)."""
    return (torch.log_softmax(logits.clamp_min(-50), -1)[..., 4] * -1).mean(-1)


def twins(make_own, make_stacked, steps: int = 5):
    torch.manual_seed(0)
    own = [MLP([16], "signed9") for _ in LRS]
    stack = MLPStack.from_members(own)
    opts = [make_own(m.parameters(), lr) for m, lr in zip(own, LRS, strict=True)]
    stacked_opt = make_stacked(stack.parameters(), torch.tensor(LRS))
    for s in range(steps):
        x = views(s)
        for m, opt in zip(own, opts, strict=True):
            opt.zero_grad()
            member_loss(m(x)).backward()
            opt.step()
        stacked_opt.zero_grad()
        member_loss(stack(x)).sum().backward()
        stacked_opt.step()
    return own, stack, stacked_opt


@pytest.mark.parametrize("kind", ["sgd", "sgd-momentum", "adam"])
def test_each_member_moves_as_its_own_network_under_torch(kind):
    if kind == "adam":
        own, stack, _ = twins(lambda p, lr: torch.optim.Adam(p, lr=lr),
                              lambda p, lr: MemberAdam(p, n=3, lr=lr))
    else:
        mom = 0.9 if kind == "sgd-momentum" else 0.0
        own, stack, _ = twins(lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=mom),
                              lambda p, lr: MemberSGD(p, n=3, lr=lr, momentum=mom))
    torch.manual_seed(0)
    start = [MLP([16], "signed9") for _ in LRS]  # what twins() started from
    shifts = []
    for k, m in enumerate(own):
        mine = stack.member(k).state_dict()
        for name, v in m.state_dict().items():
            assert torch.allclose(mine[name], v, atol=1e-6, rtol=1e-5), (kind, k, name)
        shifts.append(float((m.body[-1].bias - start[k].body[-1].bias).detach().abs().max()))
    # ... and each member's own rate was used: the shifts are ordered like the rates.
    assert shifts[0] > shifts[1] > shifts[2] > 0


def test_a_stopped_member_keeps_its_weights_and_state_while_the_others_step():
    torch.manual_seed(1)
    stack = MLPStack(3, [8], "signed9")
    opt = MemberAdam(stack.parameters(), n=3, lr=0.01)
    member_loss(stack(views(0))).sum().backward()
    opt.step()
    before = [p.detach().clone() for p in stack.parameters()]
    moments = [opt.state[p]["exp_avg"].clone() for p in stack.parameters()]
    opt.active[1] = False
    opt.zero_grad()
    member_loss(stack(views(1))).sum().backward()
    for p in stack.parameters():
        p.grad[1] = float("nan")  # what a member that went non-finite would hand the optimiser
    opt.step()
    for p, b, m in zip(stack.parameters(), before, moments, strict=True):
        assert torch.equal(p[1], b[1]) and torch.equal(opt.state[p]["exp_avg"][1], m[1])
        assert not torch.equal(p[0], b[0]) and torch.isfinite(p).all()


def test_learning_rates_can_be_set_per_member_and_saved():
    stack = MLPStack(2, [4], "signed9")
    opt = MemberSGD(stack.parameters(), n=2, lr=0.1, momentum=0.5)
    assert opt.lr.tolist() == pytest.approx([0.1, 0.1])
    opt.set_lr(torch.tensor([0.2, 0.0]))
    member_loss(stack(views(2))).sum().backward()
    before = [p.detach().clone() for p in stack.parameters()]
    opt.step()
    assert all(torch.equal(p[1], b[1]) for p, b in zip(stack.parameters(), before, strict=True))  # lr 0
    again = MemberSGD(stack.parameters(), n=2)
    again.load_state_dict(opt.state_dict())
    assert again.lr.tolist() == pytest.approx([0.2, 0.0])
    with pytest.raises(ValueError, match="first axis must be the 3 members"):
        MemberSGD(stack.parameters(), n=3).step()


def test_per_member_momentum_and_gradient_clipping_match_torch_on_each_network():
    """Member k at momentum MOM[k], its gradient norm clipped to 0.1 as clip_grad_norm_ clips
    its own network's: the same weights as torch's SGD on each network."""
    from ttt_research.models.member_optim import clip_member_grad_norm

    moms = [0.0, 0.5, 0.9]

    def clipped_sgd_step(params, opt):
        torch.nn.utils.clip_grad_norm_(params, 0.1)
        opt.step()

    torch.manual_seed(0)
    own = [MLP([16], "signed9") for _ in LRS]
    stack = MLPStack.from_members(own)
    opts = [torch.optim.SGD(m.parameters(), lr=lr, momentum=mom)
            for m, lr, mom in zip(own, LRS, moms, strict=True)]
    stacked = MemberSGD(stack.parameters(), len(LRS), lr=torch.tensor(LRS), momentum=torch.tensor(moms))
    for s in range(4):
        x = views(s)
        for m, opt in zip(own, opts, strict=True):
            opt.zero_grad()
            member_loss(m(x)).backward()
            clipped_sgd_step(list(m.parameters()), opt)
        stacked.zero_grad()
        member_loss(stack(x)).sum().backward()
        norms = clip_member_grad_norm(list(stack.parameters()), 0.1, len(LRS))
        assert norms.shape == (len(LRS),) and bool((norms > 0.1).any())  # clipping did something
        stacked.step()
    for k, m in enumerate(own):
        for a, b in zip(stack.member(k).state_dict().values(), m.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_only_the_members_named_for_a_step_move():
    torch.manual_seed(0)
    stack = MLPStack(3, [8], "signed9")
    opt = MemberAdam(stack.parameters(), 3, lr=0.1)
    before = [stack.member(k).state_dict() for k in range(3)]
    member_loss(stack(views(0))).sum().backward()
    opt.step(only=torch.tensor([True, False, True]))
    after = [stack.member(k).state_dict() for k in range(3)]
    moved = [any(not torch.equal(before[k][n], after[k][n]) for n in before[k]) for k in range(3)]
    assert moved == [True, False, True]


def test_a_member_left_out_of_a_step_does_not_count_it_in_adams_bias_correction():
    """PPO: a member with no move in a minibatch sits the step out; its single run made one
    step fewer, so its next steps use that run's (smaller) step count."""
    torch.manual_seed(0)
    own = [MLP([16], "signed9") for _ in LRS]
    stack = MLPStack.from_members(own)
    opts = [torch.optim.Adam(m.parameters(), lr=lr) for m, lr in zip(own, LRS, strict=True)]
    stacked_opt = MemberAdam(stack.parameters(), 3, lr=torch.tensor(LRS))
    plan = [[True] * 3, [True, False, True], [True, False, True], [True] * 3]
    for s, on in enumerate(plan):
        x = views(s)
        for m, opt, step in zip(own, opts, on, strict=True):
            if step:
                opt.zero_grad()
                member_loss(m(x)).backward()
                opt.step()
        stacked_opt.zero_grad()
        member_loss(stack(x)).sum().backward()
        stacked_opt.step(only=torch.tensor(on))
    for k, m in enumerate(own):
        mine = stack.member(k).state_dict()
        for name, v in m.state_dict().items():
            assert torch.allclose(mine[name], v, atol=1e-6, rtol=1e-5), (k, name)


def test_one_call_gives_torchs_optimiser_for_a_net_and_the_members_for_a_stack():
    """An algorithm asks once (``sgd``/``adam``/``set_lr``/``learning_rate``); a single run gets
    torch's own optimiser (its numbers stay torch's), a stack the per-member one."""
    net, stack = MLP([8], "signed9"), MLPStack(3, [8], "signed9")
    assert type(member_optim.sgd(net, net.parameters(), lr=0.1, momentum=0.9)) is torch.optim.SGD
    assert type(member_optim.adam(net, net.parameters(), lr=0.1)) is torch.optim.Adam
    assert isinstance(member_optim.sgd(stack, stack.parameters(), lr=0.1, momentum=0.9), MemberSGD)
    opt = member_optim.adam(stack, stack.parameters(), lr=0.1)
    assert isinstance(opt, MemberAdam)
    member_optim.set_lr(opt, torch.tensor([0.1, 0.2, 0.3]))
    assert member_optim.learning_rate(opt).tolist() == pytest.approx([0.1, 0.2, 0.3])
    single = member_optim.sgd(net, net.parameters(), lr=0.1, momentum=0.0)
    member_optim.set_lr(single, 0.05)
    assert member_optim.learning_rate(single) == 0.05
