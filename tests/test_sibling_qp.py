"""The structured ADMM for sibling least squares, against the general QP solvers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from sdclab.core.optimize import sibling_qp
from sdclab.core.optimize.least_squares import _solve_generic, by_type, sibling_pass, solve_l2
from sdclab.core.optimize.parent_problem import ParentProblem
from sdclab.core.optimize.sibling_qp import KKT_TOLERANCE, polish, project_cells, solve_sibling_qp


def random_problem(seed: int, children: int = 4, n: int = 30) -> ParentProblem:
    """Children on n cells of two hhgq types; a detailed (identity) and two marginal queries."""
    rng = np.random.default_rng(seed)
    parent = rng.integers(1, 6, n)
    kind = (np.arange(n) >= n // 2).astype(int)
    hhgq = sp.csr_matrix((np.ones(n), (kind, np.arange(n))), shape=(8, n))
    allowed = np.ones((children, n), bool)
    allowed[0, kind == 1] = False  # child 0 has no unit of the second type
    groups = np.arange(n) % 5
    queries = {
        "total": sp.csr_matrix(np.ones((1, n))),
        "detailed": sp.identity(n, format="csr"),
        "groups": sp.csr_matrix((np.ones(n), (groups, np.arange(n))), shape=(5, n)),
    }
    truth = parent * rng.dirichlet(np.ones(children), n).T
    targets = {
        name: (q @ truth.T).T + rng.normal(0, 2, (children, q.shape[0]))
        for name, q in queries.items()
    }
    return ParentProblem(
        allowed=allowed,
        parent=parent,
        totals=None,
        hhgq=hhgq,
        hhgq_lower=np.array([[0, 1] + [0] * 6] * children) * (np.arange(children) > 0)[:, None],
        hhgq_upper=np.full((children, 8), 99_999),
        queries=queries,
        targets=targets,
        weights={
            "total": np.full(children, 2.0),
            "detailed": rng.uniform(0.2, 1, children),
            "groups": np.full(children, 0.5),
        },
        l2_passes=(("total",), ("detailed", "groups")),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_admm_reaches_the_optimum_of_the_general_solver(seed):
    problem = random_problem(seed)
    queries = ("total", "detailed", "groups")
    qp = sibling_pass(problem, queries, {}, 0.1)
    admm, iterations = solve_sibling_qp(qp)
    exact = _solve_generic(problem, queries, {}, 0.1)
    assert iterations > 1
    assert qp.objective(admm) == pytest.approx(qp.objective(exact), rel=1e-5, abs=1e-5)
    assert np.abs(admm - exact).max() < 1e-3
    assert (admm >= 0).all() and (admm[~problem.allowed] == 0).all()
    assert np.abs(admm.sum(axis=0) - problem.parent).max() < 1e-9  # the projection is exact


def test_cell_projection_is_the_euclidean_projection():
    rng = np.random.default_rng(4)
    v = rng.normal(0, 3, (5, 40))
    mask = rng.random((5, 40)) < 0.8
    mask[0] = True
    parent = rng.uniform(0.5, 6, 40)
    x = project_cells(v, mask, parent)
    assert np.allclose(x.sum(axis=0), parent) and (x >= 0).all() and (x[~mask] == 0).all()
    # optimality: within a column, the positive entries share one shift v − x = θ and every
    # masked zero entry lies at or below it (KKT conditions of the simplex projection)
    for j in range(40):
        on = mask[:, j]
        shift = (v - x)[on, j]
        positive = x[on, j] > 0
        assert np.allclose(shift[positive], shift[positive][0])
        assert (v[on, j][~positive] <= shift[positive][0] + 1e-12).all()


def test_totals_pass_reduces_exactly_to_types():
    problem = random_problem(5)
    assert by_type(problem, ("total",)) is not None
    assert by_type(problem, ("detailed",)) is None
    reduced = solve_l2(replace(problem, l2_passes=(("total",),)))
    qp = sibling_pass(problem, ("total",), {}, 0.1)
    exact = _solve_generic(problem, ("total",), {}, 0.1)
    assert qp.objective(reduced) == pytest.approx(qp.objective(exact), abs=1e-6)
    assert np.array_equal(reduced.sum(axis=1).round(6), exact.sum(axis=1).round(6))


def test_an_empty_parent_gives_empty_children():
    problem = random_problem(6)
    empty = replace(
        problem,
        allowed=problem.allowed[:, :0],
        parent=problem.parent[:0],
        hhgq=problem.hhgq[:, :0],
        queries={name: q[:0, :0] for name, q in problem.queries.items()},
        targets={name: t[:, :0] for name, t in problem.targets.items()},
    )
    assert solve_l2(empty).shape == (4, 0)


def test_projection_of_an_empty_parent_cell_is_zero():
    v = np.array([[1.0, 2.0], [3.0, -1.0]])
    x = project_cells(v, np.ones((2, 2), bool), np.array([0.0, 2.0]))
    assert (x[:, 0] == 0).all() and x[:, 1].sum() == pytest.approx(2.0)


def _loose_guess(qp, exact, seed):
    """ADMM's iterate at a loose tolerance, imitated: the optimum moved by 10⁻³, re-projected."""
    rng = np.random.default_rng(seed)
    y = project_cells(exact + rng.normal(0, 1e-3, exact.shape) * (exact > 0), qp.mask, qp.parent)
    return y, np.clip((qp.bounds @ y.T).T, qp.lower, qp.upper)


def _binding_problem(seed: int) -> ParentProblem:
    """Twelve children; child 1 must hold 60% of the parent's second type (a lower bound that
    binds)."""
    problem = random_problem(seed, children=12)
    second_type = problem.parent[problem.parent.size // 2 :].sum()
    lower = problem.hhgq_lower.copy()
    lower[1, 1] = int(0.6 * second_type)
    return replace(problem, hhgq_lower=lower)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("work", [1e9, 0.0], ids=["dense", "conjugate-gradients"])
def test_polish_finds_the_exact_optimum_from_a_loose_iterate(seed, work, monkeypatch):
    monkeypatch.setattr(sibling_qp, "POLISH_WORK", work)
    problem = _binding_problem(seed)
    queries = ("total", "detailed", "groups")
    qp = sibling_pass(problem, queries, {}, 0.1)
    exact = _solve_generic(problem, queries, {}, 0.1)
    assert (problem.hhgq @ exact.T)[1, 1] == pytest.approx(problem.hhgq_lower[1, 1], abs=1e-6)
    polished = polish(qp, *_loose_guess(qp, exact, seed))
    assert polished is not None
    assert np.abs(polished - exact).max() < 1e-6
    assert qp.objective(polished) <= qp.objective(exact) + 1e-9
    assert (polished >= 0).all() and np.abs(polished.sum(axis=0) - problem.parent).max() < 1e-9
    kx = (qp.bounds @ polished.T).T  # within the polish's acceptance tolerance
    assert (kx >= qp.lower - KKT_TOLERANCE).all() and (kx <= qp.upper + KKT_TOLERANCE).all()


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("work", [1e9, 0.0], ids=["dense", "conjugate-gradients"])
def test_polish_from_a_wrong_guess_is_the_optimum_or_nothing(seed, work, monkeypatch):
    """Every variable free and no bound held: the active-set steps must correct the guess or give
    up; they may never return a point that is not the optimum."""
    monkeypatch.setattr(sibling_qp, "POLISH_WORK", work)
    problem = _binding_problem(seed)
    queries = ("total", "detailed", "groups")
    qp = sibling_pass(problem, queries, {}, 0.1)
    exact = _solve_generic(problem, queries, {}, 0.1)
    y = project_cells(np.ones(problem.allowed.shape), qp.mask, qp.parent)
    kz = np.clip((qp.bounds @ y.T).T, qp.lower, qp.upper)
    polished = polish(qp, y, kz)
    assert polished is None or np.abs(polished - exact).max() < 1e-6


def test_admm_with_polish_meets_the_bounds_exactly():
    problem = _binding_problem(6)
    qp = sibling_pass(problem, ("total", "detailed", "groups"), {}, 0.1)
    x, iterations = solve_sibling_qp(qp)
    kx = (qp.bounds @ x.T).T
    assert (kx >= qp.lower - 1e-9).all() and (kx <= qp.upper + 1e-9).all()
    assert iterations < 1000  # polished at a loose tolerance, not run to the last one


def _second_pass(seed: int, children: int):
    """The second pass of a random problem: each child's total within ±0.1 of the first pass's
    (as TopDown fixes them), with a loose iterate as the polish's first guess and a reference
    optimum from the general solver."""
    problem = random_problem(seed, children=children, n=40)
    first = _solve_generic(problem, ("total",), {}, 0.1)
    fixed = {"total": (problem.queries["total"] @ first.T).T}
    queries = ("detailed", "groups")
    qp = sibling_pass(problem, queries, fixed, 0.1)
    reference = _solve_generic(problem, queries, fixed, 0.1)
    return qp, reference, *_loose_guess(qp, reference, seed)


def _is_optimal(qp, x, reference) -> bool:
    """Feasible (to the polish's tolerance) and no worse than the general solver's optimum."""
    kx = (qp.bounds @ x.T).T
    feasible = (kx >= qp.lower - KKT_TOLERANCE).all() and (kx <= qp.upper + KKT_TOLERANCE).all()
    cells = np.abs(x.sum(axis=0) - qp.parent).max() < 1e-9 and (x >= 0).all()
    return bool(feasible and cells and qp.objective(x) <= qp.objective(reference) + 1e-7)


def test_polish_certifies_second_passes_whose_totals_are_all_held(monkeypatch):
    """The children's totals sum to the parent's, so a guess holding every one at a bound is
    singular (and infeasible unless the bounds add up): the polish frees the total that can give
    way and goes on. Over 12 such guesses (6 problems, dense and CG paths) every answer is the
    optimum or nothing, and at least 8 are certified (the polish that did not free one: 4)."""
    certified = 0
    for work in (1e9, 0.0):
        monkeypatch.setattr(sibling_qp, "POLISH_WORK", work)
        for seed in range(1, 7):
            qp, reference, y, kz = _second_pass(seed, children=12)
            total = sibling_qp._total_row(qp)
            middle = (qp.lower[:, total] + qp.upper[:, total]) / 2
            kz[:, total] = np.where(kz[:, total] > middle, qp.upper[:, total], qp.lower[:, total])
            polished = polish(qp, y, kz)
            assert polished is None or _is_optimal(qp, polished, reference)
            certified += polished is not None
    assert certified >= 8


@pytest.mark.parametrize("children", [7, 25])
@pytest.mark.parametrize("work", [1e9, 0.0], ids=["dense", "conjugate-gradients"])
def test_polish_of_second_passes_is_the_optimum_or_nothing(children, work, monkeypatch):
    monkeypatch.setattr(sibling_qp, "POLISH_WORK", work)
    for seed in range(1, 7):
        qp, reference, y, kz = _second_pass(seed, children)
        polished = polish(qp, y, kz)
        assert polished is None or _is_optimal(qp, polished, reference)


def test_siblings_measured_alike_share_one_exact_factor():
    problem = random_problem(5, children=6)
    problem.weights["detailed"][2:] = 0.7  # children 2–5 alike; 0 (mask) and 1 (weight) apart
    qp = sibling_pass(problem, ("total", "detailed", "groups"), {}, 0.1)
    stacked = sp.vstack([qp.rows, qp.bounds], format="csr")
    rho = 0.3
    factor = sibling_qp._Factor.build(qp, stacked, rho)
    assert sorted(len(members) for members in factor.members) == [1, 1, 4]
    rhs = np.random.default_rng(6).normal(size=qp.mask.shape)
    x = factor.solve(stacked, rhs)
    rows, k = qp.rows.toarray(), qp.bounds.toarray()
    for c in range(qp.mask.shape[0]):
        cells = np.flatnonzero(qp.mask[c])
        a, kc = rows[:, cells], k[:, cells]
        hessian = (
            np.diag(2 * qp.diag_weight[c, cells] + rho)
            + 2 * (a.T * qp.row_weight[c]) @ a
            + rho * kc.T @ kc
        )
        assert np.allclose(x[c, cells], np.linalg.solve(hessian, rhs[c, cells]), atol=1e-10)
        assert (x[c, ~qp.mask[c]] == 0).all()
