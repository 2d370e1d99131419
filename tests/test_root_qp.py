"""The root's structured interior point method, against the general QP solvers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sdclab.core.optimize import least_squares, root_qp
from sdclab.core.optimize.least_squares import _solve_generic, sibling_pass, solve_l2
from sdclab.core.optimize.parent_problem import ParentProblem
from sdclab.core.optimize.sibling_qp import NotConverged


def root_problem(seed: int, n: int = 240, persons: int = 60, lower: int = 1) -> ParentProblem:
    """One histogram of n cells over 4 hhgq types, mostly empty (as a small nation is): a
    detailed query and three marginals with noise, an invariant total and hhgq lower bounds."""
    rng = np.random.default_rng(seed)
    kind = np.arange(n) % 4
    hhgq = sp.csr_matrix((np.ones(n), (kind, np.arange(n))), shape=(8, n))
    truth = np.zeros(n)
    np.add.at(truth, rng.choice(n // 3, persons), 1)  # the persons crowd into few cells
    groups_a, groups_b = np.arange(n) % 6, (np.arange(n) // 6) % 10
    queries = {
        "total": sp.csr_matrix(np.ones((1, n))),
        "hhgq": hhgq,
        "a": sp.csr_matrix((np.ones(n), (groups_a, np.arange(n))), shape=(6, n)),
        "b": sp.csr_matrix((np.ones(n), (groups_b, np.arange(n))), shape=(10, n)),
        "detailed": sp.identity(n, format="csr"),
    }
    weights = {"total": 0.0, "hhgq": 0.5, "a": 1.0, "b": 1.0, "detailed": 2.0}
    targets = {  # noise of variance 1 / weight (none on the unmeasured total)
        name: (
            (q @ truth)
            + rng.normal(0, 1, q.shape[0])
            / np.sqrt(max(weights[name], 1e-12))
            * (weights[name] > 0)
        )[None, :]
        for name, q in queries.items()
    }
    allowed = np.ones((1, n), bool)
    allowed[0, :5] = False  # a few structural zeros
    return ParentProblem(
        allowed=allowed,
        parent=None,
        totals=np.array([persons]),
        hhgq=hhgq,
        hhgq_lower=np.array([[0, lower, lower, lower, 0, 0, 0, 0]]),
        hhgq_upper=np.full((1, 8), 99_999),
        queries=queries,
        targets=targets,
        weights={name: np.array([w]) for name, w in weights.items()},
        l2_passes=(tuple(queries),),
    )


def pass_of(problem: ParentProblem):
    return sibling_pass(problem, problem.l2_passes[0], {}, least_squares.TOLERANCE)


def kkt_violation(qp, x: np.ndarray) -> float:
    """The natural residual max_j |min(x_j, r_j)| of the optimality conditions, r the reduced
    gradient after the least-squares multipliers of the bound rows at their bounds: zero exactly
    at the optimum (each cell is empty or has a zero reduced gradient, none could gain by
    filling)."""
    gradient = qp.gradient(x)[0]
    k = qp.bounds.toarray()
    kx = k @ x[0]
    active = (np.abs(kx - qp.lower[0]) < 1e-6) | (np.abs(kx - qp.upper[0]) < 1e-6)
    filled = x[0] > 1e-3
    multipliers, *_ = np.linalg.lstsq(k[active][:, filled].T, gradient[filled], rcond=None)
    reduced = gradient - k[active].T @ multipliers
    on_mask = qp.mask[0]
    return float(np.abs(np.minimum(x[0], reduced)[on_mask]).max())


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_root_optimum_matches_the_general_solver(seed):
    problem = root_problem(seed)
    qp = pass_of(problem)
    x = root_qp.solve_root_qp(qp)
    exact = _solve_generic(problem, problem.l2_passes[0], {}, least_squares.TOLERANCE)
    assert qp.objective(x) <= qp.objective(exact) + 1e-6 * abs(qp.objective(exact))
    assert np.abs(x - exact).max() < 1e-3
    assert (x >= 0).all() and (x[~problem.allowed] == 0).all()
    assert x.sum() == pytest.approx(60, abs=1e-7)
    hhgq = problem.hhgq.toarray() @ x[0]
    assert (hhgq[1:4] >= 1 - 1e-7).all()
    # the interior point stops at complementarity x·z ≤ GAP·|f| ≈ 10⁻⁷: no cell is off by more
    # than its square root
    assert kkt_violation(qp, x) < 1e-3


def test_binding_lower_bounds_are_met():
    """A type whose answers say nobody lives there must still hold the 5 persons its facilities
    need: the bound binds and the optimum puts them where the answers are least negative."""
    problem = no_persons_of_type_3(root_problem(5, lower=5))
    qp = pass_of(problem)
    x = root_qp.solve_root_qp(qp)
    exact = _solve_generic(problem, problem.l2_passes[0], {}, least_squares.TOLERANCE)
    hhgq = problem.hhgq.toarray() @ x[0]
    assert hhgq[3] == pytest.approx(5, abs=1e-6)  # the bound binds
    assert qp.objective(x) == pytest.approx(qp.objective(exact), rel=1e-7)


def test_cells_the_marginals_demand_join_the_working_set(monkeypatch):
    """Cells whose detailed answers are all below the noise, but whose marginal says 30 persons
    live there, start outside the working set and must join it."""
    problem = root_problem(6)
    shifted = dict(problem.targets)
    detailed = shifted["detailed"].copy()
    group = np.flatnonzero(np.arange(problem.n_cells) % 6 == 5)
    detailed[0, group] = 0.1
    shifted["detailed"] = detailed
    a = shifted["a"].copy()
    a[0, 5] = 30.0
    shifted["a"] = a
    problem = ParentProblem(**{**problem.__dict__, "targets": shifted})
    rounds = []
    real = root_qp._interior_point
    monkeypatch.setattr(root_qp, "_interior_point", lambda d: rounds.append(len(d.h)) or real(d))
    qp = pass_of(problem)
    x = root_qp.solve_root_qp(qp)
    assert len(rounds) >= 2 and rounds[0] < rounds[-1] < qp.mask.sum()  # grew, not fell back
    assert x[0, group].sum() > 5  # the demanded cells filled
    exact = _solve_generic(problem, problem.l2_passes[0], {}, least_squares.TOLERANCE)
    assert qp.objective(x) == pytest.approx(qp.objective(exact), rel=1e-7)


def no_persons_of_type_3(problem: ParentProblem) -> ParentProblem:
    """The answers say nobody lives in hhgq type 3; its facilities need ``hhgq_lower`` persons."""
    targets = dict(problem.targets)
    targets["detailed"] = np.where(np.arange(problem.n_cells) % 4 == 3, -2.0, targets["detailed"])
    targets["hhgq"] = targets["hhgq"].copy()
    targets["hhgq"][0, 3] = 0.0
    return ParentProblem(**{**problem.__dict__, "targets": targets})


def test_an_infeasible_working_set_falls_back_to_every_cell(monkeypatch):
    """No cell of type 3 starts in the working set, so the restricted problem cannot give type 3
    the 3 persons its bound needs; the whole problem is solved instead, to the same optimum."""
    problem = no_persons_of_type_3(root_problem(7, lower=3))
    monkeypatch.setattr(root_qp, "PER_BOUND_ROW", 0)
    sizes = []
    real = root_qp._interior_point
    monkeypatch.setattr(root_qp, "_interior_point", lambda d: sizes.append(len(d.h)) or real(d))
    qp = pass_of(problem)
    x = root_qp.solve_root_qp(qp)
    assert sizes[0] < qp.mask.sum() and sizes[-1] == qp.mask.sum()
    assert (problem.hhgq.toarray() @ x[0])[3] == pytest.approx(3, abs=1e-6)
    exact = _solve_generic(problem, problem.l2_passes[0], {}, least_squares.TOLERANCE)
    assert qp.objective(x) == pytest.approx(qp.objective(exact), rel=1e-7)


def test_a_large_population_is_solved_in_scaled_units():
    """60,000 persons on 240 cells: the method works in units of 250 persons (the total over the
    number of cells) and returns persons, at the optimum of the general solver."""
    problem = root_problem(10, persons=60_000)
    qp = pass_of(problem)
    data, scale = root_qp._scaled(qp, np.flatnonzero(qp.mask[0]))
    assert scale > 100
    x = root_qp.solve_root_qp(qp)
    exact = _solve_generic(problem, problem.l2_passes[0], {}, least_squares.TOLERANCE)
    assert x.sum() == pytest.approx(60_000, rel=1e-9)
    assert qp.objective(x) <= qp.objective(exact) * (1 + 1e-6)
    assert np.abs(x - exact).max() < 1e-2 * 250


def test_gram_counts_repeated_entries_once_summed():
    """B diag(v) Bᵀ of a B holding one (row, column) entry twice is that of the summed matrix."""
    raw = sp.csr_matrix(([1.0, 2.0, 3.0, 1.0], [0, 0, 1, 1], [0, 3, 4]), shape=(2, 2))
    v = np.array([2.0, 5.0])
    dense = raw.toarray()
    assert root_qp._Gram(raw)(v) == pytest.approx(dense @ np.diag(v) @ dense.T)


def test_solve_l2_falls_back_to_the_general_solvers(monkeypatch):
    problem = root_problem(8)
    direct = solve_l2(problem)

    def fails(qp):
        raise NotConverged("forced")

    monkeypatch.setattr(least_squares, "solve_root_qp", fails)
    general = solve_l2(problem)
    qp = pass_of(problem)
    # the general solvers stop at a relative gap of 10⁻⁶
    assert qp.objective(general) == pytest.approx(qp.objective(direct), rel=1e-6)
    assert np.abs(general - direct).max() < 1e-3


def test_a_problem_with_a_parent_is_refused():
    problem = root_problem(9)
    qp = pass_of(problem)
    from dataclasses import replace

    with pytest.raises(ValueError, match="no parent"):
        root_qp.solve_root_qp(replace(qp, parent=np.ones(qp.mask.shape[1])))
