"""The worked example of seed 002 §3: gradient descent as a discretised gradient flow
(eq. 3), momentum (§4.1, eqs. 5-6), and a residual stream as Euler steps of dh/dt = F(h)
(eq. 4).

The descent steps are taken by the NumPy engine's optimiser (``light_llm.reference.optim.SGD``);
the exact flows, of linear systems, by the matrix exponential (``scipy.linalg.expm``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.linalg import expm

from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.reference.optim import SGD

SEED_002_FLOW = "seed 002 §3.1"
SEED_002_RESIDUAL = "seed 002 §3.2"
CURVATURE = [[1.0, 0.0], [0.0, 4.0]]  # H of L(θ) = ½ θ^T H θ
THETA_0 = [2.0, 1.0]
LEARNING_RATE = 0.1
STEPS = 20
SHOWN = (0, 1, 2, 5, 10, 20)  # steps printed
STEP_SIZES = (0.2, 0.1, 0.05, 0.01)  # η for the convergence table
FLOW_TIME = 2.0
MOMENTUM = 0.9
# F(h) = A h: a rotation with some damping, for the residual stream
RESIDUAL_MATRIX = [[-0.5, -2.0], [2.0, -0.5]]
H_0 = [1.0, 0.0]
DEPTHS = (4, 10, 100)


def gradient(theta: np.ndarray) -> np.ndarray:
    """∇L(θ) = H θ for L(θ) = ½ θ^T H θ."""
    return np.array(CURVATURE) @ theta


def descend(lr: float, steps: int, momentum: float = 0.0) -> np.ndarray:
    """θ_0 .. θ_steps by the NumPy engine's SGD (with ``momentum`` β, the seed's exponential
    average: dampening β, so v_t = β v_{t-1} + (1-β) ∇L); (steps + 1, 2)."""
    params = {"theta": np.array(THETA_0)}
    optimizer = SGD(params, lr=lr, momentum=momentum, dampening=momentum)
    path = [params["theta"].copy()]
    for _ in range(steps):
        optimizer.step({"theta": gradient(params["theta"])})
        path.append(params["theta"].copy())
    return np.array(path)


def flow(times: np.ndarray) -> np.ndarray:
    """The exact gradient flow θ(t) = e^{-H t} θ_0 of dθ/dt = -H θ at each time; (n, 2)."""
    h = np.array(CURVATURE)
    return np.array([expm(-h * t) @ np.array(THETA_0) for t in times])


def residual_stream(depth: int) -> np.ndarray:
    """h_0 .. h_L with h_{l+1} = h_l + F(h_l) / L, F(h) = A h: L Euler steps of size 1/L over
    t in [0, 1]; (L + 1, 2)."""
    a = np.array(RESIDUAL_MATRIX)
    states = [np.array(H_0)]
    for _ in range(depth):
        states.append(states[-1] + a @ states[-1] / depth)
    return np.array(states)


def exact_residual_flow(times: np.ndarray) -> np.ndarray:
    """h(t) = e^{A t} h_0, the solution of dh/dt = A h; (n, 2)."""
    a = np.array(RESIDUAL_MATRIX)
    return np.array([expm(a * t) @ np.array(H_0) for t in times])


def gradient_flow() -> list[Step]:
    """Gradient descent θ_{t+1} = θ_t - η ∇L as Euler steps of dθ/dt = -∇L (seed 002 §3.1,
    eq. 3), its error against the exact flow as η shrinks, momentum (§4.1, eqs. 5-6), and the
    residual stream h_{l+1} = h_l + F(h_l) as Euler steps of dh/dt = F(h) (§3.2, eq. 4)."""
    path = descend(LEARNING_RATE, STEPS)
    shown = list(SHOWN)
    exact = flow(np.array(shown) * LEARNING_RATE)
    errors = []
    for lr in STEP_SIZES:
        steps = round(FLOW_TIME / lr)
        errors.append(np.linalg.norm(descend(lr, steps)[-1] - flow(np.array([FLOW_TIME]))[0]))
    momentum_path = descend(LEARNING_RATE, STEPS, MOMENTUM)
    step_labels = tuple(f"k={k}" for k in shown)
    residual = {depth: residual_stream(depth) for depth in DEPTHS}
    exact_end = exact_residual_flow(np.array([1.0]))[0]
    return [
        Step(
            "Loss L(θ) = ½ θ^T H θ, H = diag(1, 4), θ_0 = (2, 1)",
            "Assumed: a two-parameter quadratic bowl, steeper along θ_2. Its gradient is "
            "∇L = H θ, so gradient flow dθ/dt = -H θ has the exact solution θ(t) = e^{-Ht} θ_0: "
            "each coordinate decays as e^{-λ t}.",
            np.array(CURVATURE),
            SEED_002_FLOW,
            rows=("θ_1", "θ_2"),
            columns=("θ_1", "θ_2"),
            key="loss-l-theta-theta-t-h-theta",
        ),
        Step(
            "Gradient descent θ_{t+1} = θ_t - η ∇L, η = 0.1",
            "The NumPy engine's SGD (no momentum) at some steps k: each step is one Euler "
            "step of length η along -∇L.",
            path[shown],
            f"{SEED_002_FLOW}, eq. 3",
            rows=step_labels,
            columns=("θ_1", "θ_2"),
            key="gradient-descent-theta-t-1-theta-t",
        ),
        Step(
            "Gradient flow θ(t) = e^{-Ht} θ_0 at t = kη",
            "The continuous flow at the same times: descent trails it a little, because each "
            "Euler step uses the slope at its start (θ_2 shrinks by 1 - 0.4 = 0.6 a step, the "
            "flow by e^{-0.4} = 0.67).",
            exact,
            f"{SEED_002_FLOW}, eq. 3",
            rows=step_labels,
            columns=("θ_1", "θ_2"),
            key="gradient-flow-theta-t-e-ht-theta-0-at-t-k-eta",
        ),
        Step(
            f"Distance from the flow at t = {FLOW_TIME:g}, for shrinking η",
            "||θ_descent - θ(t)|| after t/η steps: halving η about halves the error (Euler's "
            "method is first order), so small steps follow the flow.",
            errors,
            SEED_002_FLOW,
            columns=tuple(f"η={lr:g}" for lr in STEP_SIZES),
            key="distance-from-the-flow",
        ),
        Step(
            "Momentum: v_t = β v_{t-1} + (1-β) ∇L, θ_t = θ_{t-1} - η v_t",
            f"β = {MOMENTUM}, η = {LEARNING_RATE}, by the NumPy engine's SGD with momentum. The "
            "velocity remembers past gradients, so early steps are short (v starts at 0) and "
            "the path overshoots and circles in towards the minimum, like a heavy ball.",
            momentum_path[shown],
            "seed 002 §4.1, eqs. 5-6",
            rows=step_labels,
            columns=("θ_1", "θ_2"),
            key="momentum-v-t-beta-v-t-1",
        ),
        Step(
            "Residual stream: h_{l+1} = h_l + F(h_l), L = 10 layers",
            "Assumed: F(h) = A h / L with A = [[-0.5, -2], [2, -0.5]] (a slow spiral), "
            "h_0 = (1, 0). Each residual block adds a small update to the stream: one Euler step "
            "of size 1/L of dh/dt = A h. The rows are the layers.",
            residual[10][[0, 1, 2, 5, 10]],
            f"{SEED_002_RESIDUAL}, eq. 4",
            rows=tuple(f"l={layer}" for layer in (0, 1, 2, 5, 10)),
            columns=("h_1", "h_2"),
            key="residual-stream-h-l-1-h-l-f-h-l-l-10-layers",
        ),
        Step(
            "Output h_L of the stream against the ODE's h(1) = e^A h_0",
            "The deeper the stack (the smaller each block's update), the closer the stream "
            "follows the continuous flow: deep residual networks are discretised ODEs.",
            np.array([*(residual[depth][-1] for depth in DEPTHS), exact_end]),
            f"{SEED_002_RESIDUAL}, eq. 4",
            rows=(*(f"L={depth}" for depth in DEPTHS), "ODE h(1)"),
            columns=("h_1", "h_2"),
            key="output-h-l-of-the-stream-against",
        ),
    ]


def gradient_flow_figures(folder: Path) -> list[Path]:
    times = np.linspace(0.0, STEPS * LEARNING_RATE, 200)
    descent_panel = (
        "descent (η = 0.1) and momentum vs the flow",
        [
            ("gradient flow θ(t)", flow(times), "-"),
            ("gradient descent", descend(LEARNING_RATE, STEPS), "o--"),
            ("momentum β = 0.9", descend(LEARNING_RATE, STEPS, MOMENTUM), "s:"),
        ],
    )
    residual_panel = (
        "residual stream vs dh/dt = A h",
        [
            ("ODE h(t), t in [0, 1]", exact_residual_flow(np.linspace(0.0, 1.0, 200)), "-"),
            *((f"L = {depth} blocks", residual_stream(depth), "o--") for depth in DEPTHS[:2]),
        ],
    )
    return [
        plots.trajectories_figure(
            folder / "gradient_flow.png",
            [descent_panel, residual_panel],
            "Discrete steps following continuous flows (seed 002 §3)",
            "coordinate 1",
            "coordinate 2",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "gradient-flow",
        "gradient descent and momentum as discretised gradient flow, and the residual "
        "stream as Euler steps of dh/dt = F(h) (seed 002 §3, §4.1)",
        gradient_flow,
        gradient_flow_figures,
    ),
)
