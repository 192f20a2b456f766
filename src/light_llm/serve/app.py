"""The explorer's FastAPI application: the page (HTML, script and style shipped in this
package, nothing from another host) and the JSON API under it.

    POST /api/tokenize     {text}                                   -> ids, tokens
    POST /api/next-token   {prompt, temperature, top_k, top_p, limit} -> tokens with P before
                                                                       and after the filters
    POST /api/attention    {prompt}                                 -> weights[layer][head][q][k]
    POST /api/flow         {prompt, position}                       -> every stage of the forward
                                                                       pass at one token (flow.py)
    POST /api/generate     {prompt, max_new_tokens, temperature, top_k, top_p, seed}
                                                                    -> server-sent events
    POST /api/fill-mask    {text, text_pair, top_k}                 -> per [MASK], the top tokens
    POST /api/similarity   {sentences}                              -> cosine similarity matrix
    GET  /api/model                                                 -> config, training facts
    GET  /api/explain, /api/explain/{name}                          -> as ``explain --json``
    GET  /api/explain/{name}/figures/{file}                         -> the example's PNGs
    POST /api/inspect/...  lens, attribution, ablate, importance, patching, head-roles,
                           neuron, surprise: looking inside a GPT (inspect_api.py)
    GET  /api/runs, /api/runs/{index}/probes/{iteration}
                                                                    -> training runs replayed
                                                                       (history.py)

A field out of range is answered 422 with the field named in ``detail[i].loc`` and one
sentence in ``detail[i].msg``, as FastAPI does for every validation error.
"""

from __future__ import annotations

import json
import tempfile
import threading
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi import Path as PathParameter
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import Field

from light_llm import explain
from light_llm.errors import CheckpointError, ConfigError, LightLLMError
from light_llm.explain.render import needs_scientific
from light_llm.limits import MAX_NEW_TOKENS, SEED_LIMIT
from light_llm.sampling_options import DEFAULT_TEMPERATURE
from light_llm.serve.fields import Body, Prompt
from light_llm.serve.flow import flow
from light_llm.serve.guard import Guard, allowed_hosts
from light_llm.serve.history import RunHistory, UnknownRecord, runs_shown
from light_llm.serve.inspect_api import inspect_router
from light_llm.serve.inspection import Inspection
from light_llm.serve.session import ExplorerModel, NotForThisModel, RequestError, event_stream

STATIC = resources.files("light_llm.serve") / "static"
PAGE_ROUTES = ("/", "/explain", "/explain/{name}")


# ---------------------------------------------------------------------- request bodies
# every bound is the library's (sampling_options.py, limits.py), checked before a stream starts
Temperature = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
TopK = Annotated[int | None, Field(ge=1)]
TopP = Annotated[float | None, Field(gt=0.0, le=1.0, allow_inf_nan=False)]
# a run's index or an iteration in a path: digits only (an int parameter would take "8.0")
WholeNumber = Annotated[str, PathParameter(pattern=r"^[0-9]{1,12}$")]


class TokenizeBody(Body):
    text: Prompt


class PromptBody(Body):
    prompt: Prompt


class NextTokenBody(Body):
    prompt: Prompt
    temperature: Temperature = DEFAULT_TEMPERATURE
    top_k: TopK = None
    top_p: TopP = None
    limit: Annotated[int, Field(ge=1, le=1000)] = 20


class GenerateBody(Body):
    prompt: Prompt
    max_new_tokens: Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)] = 200
    temperature: Temperature = DEFAULT_TEMPERATURE
    top_k: TopK = None
    top_p: TopP = None
    seed: Annotated[int | None, Field(ge=0, le=SEED_LIMIT - 1)] = None


class FlowBody(Body):
    prompt: Prompt
    position: Annotated[int | None, Field(ge=-100_000, le=100_000)] = None


class FillMaskBody(Body):
    text: Prompt
    text_pair: Prompt | None = None
    top_k: Annotated[int, Field(ge=1, le=100)] = 5


class SimilarityBody(Body):
    sentences: Annotated[list[Prompt], Field(min_length=1, max_length=64)]


# ---------------------------------------------------------------------- the worked examples
class ExampleFigures:
    """The PNGs of the worked examples, drawn on first request into a folder that lives as
    long as the server."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.drawn: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def names(self, name: str) -> list[str]:
        with self.lock:
            if name not in self.drawn:
                paths = explain.write_figures(name, self.folder / name)
                self.drawn[name] = [path.name for path in paths]
            return self.drawn[name]


def example_document(name: str, figures: ExampleFigures) -> dict[str, Any]:
    """``light-llm explain NAME --json``'s document, with the URLs of its pictures and, per
    step, how the terminal prints its numbers ("format": "integer", "scientific" or
    "decimal", 4 digits either way), which JSON's numbers do not tell."""
    example = explain.get(name)
    steps = example.steps()
    document = explain.example_json(example.name, example.summary, steps)
    for step, entry in zip(steps, document["steps"], strict=True):
        values = np.asarray(step.value)
        if values.dtype.kind in "iub":
            entry["format"] = "integer"
        else:
            entry["format"] = "scientific" if needs_scientific(values) else "decimal"
    document["figures"] = [
        f"/api/explain/{name}/figures/{file}" for file in figures.names(example.name)
    ]
    return document


# ---------------------------------------------------------------------- the application
def error_body(field: str | tuple | None, message: str, **extra: Any) -> dict[str, Any]:
    """FastAPI's validation-error shape: {"detail": [{"loc", "msg", "type"}]}; ``field`` a
    name, or a list's name and an index in it (["body", "sentences", 2])."""
    named = field if isinstance(field, tuple) else (field,) if field else ()
    location = ["body", *named]
    return {"detail": [{"loc": location, "msg": message, "type": "value_error", **extra}]}


def server_sent_event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def create_app(
    explorer: ExplorerModel, compared: list[RunHistory] | tuple = (), host: str | None = None
) -> FastAPI:
    """The explorer's application for the model ``explorer`` holds; its training run (when it
    comes from one) and the ``compared`` runs are replayed under /api/runs. It answers
    requests for the loopback host names and ``host`` (the address it listens on) only, with
    bodies of bounded size (:mod:`light_llm.serve.guard`)."""
    runs = runs_shown(explorer.run_folder, compared)
    scratch = tempfile.TemporaryDirectory(prefix="light-llm-serve-")
    figures = ExampleFigures(Path(scratch.name))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            yield
        finally:
            scratch.cleanup()

    def model_as_it_is_now() -> None:
        """Before every request: the checkpoint again if a run still training replaced it, so
        that every answer (not only the model card the page polls) is the model as it is."""
        explorer.follow_the_run()

    app = FastAPI(
        title="light-llm explorer",
        description="The numbers inside a light-llm model, computed by the code that trains it.",
        lifespan=lifespan,
        docs_url=None,  # the interactive docs load their script from a CDN: not here
        redoc_url=None,
        dependencies=[Depends(model_as_it_is_now)],
    )
    app.state.explorer = explorer
    app.add_middleware(Guard, hosts=allowed_hosts(host))
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.include_router(inspect_router(Inspection(explorer)))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's answer without the offending input, which may be NaN (not valid JSON)
        errors = [
            {"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]}
            for error in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse(error_body(exc.field, str(exc), **exc.extra), status_code=422)

    @app.exception_handler(NotForThisModel)
    async def not_for_this_model(request: Request, exc: NotForThisModel) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(LightLLMError)
    async def light_llm_error(request: Request, exc: LightLLMError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    def page() -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))

    for route in PAGE_ROUTES:
        app.add_api_route(route, page, methods=["GET"], include_in_schema=False)

    @app.get("/api/model")
    def model_card() -> dict[str, Any]:
        # the library's sampling defaults, which the page's controls start from
        return {**explorer.card(), "defaults": {"temperature": DEFAULT_TEMPERATURE}}

    @app.post("/api/tokenize")
    def tokenize(body: TokenizeBody) -> dict[str, Any]:
        return explorer.tokenize(body.text)

    @app.post("/api/next-token")
    def next_token(body: NextTokenBody) -> dict[str, Any]:
        return explorer.next_token(
            body.prompt, body.temperature, body.top_k, body.top_p, body.limit
        )

    @app.post("/api/attention")
    def attention(body: PromptBody) -> dict[str, Any]:
        return explorer.attention(body.prompt)

    @app.post("/api/flow")
    def forward_flow(body: FlowBody) -> dict[str, Any]:
        return flow(explorer, body.prompt, body.position)

    @app.post("/api/fill-mask")
    def fill_mask(body: FillMaskBody) -> dict[str, Any]:
        return explorer.fill_mask(body.text, body.text_pair, body.top_k)

    @app.post("/api/similarity")
    def similarity(body: SimilarityBody) -> dict[str, Any]:
        return explorer.similarity(body.sentences)

    @app.post("/api/generate")
    def generate(body: GenerateBody) -> StreamingResponse:
        explorer.require_gpt("text generation")
        explorer.encode(body.prompt)  # an empty prompt is refused before the stream starts
        cancelled = threading.Event()
        events = event_stream(explorer, body.model_dump(), cancelled)

        async def stream():
            try:
                while (item := await run_in_threadpool(next, events, None)) is not None:
                    yield server_sent_event(*item)
            finally:
                cancelled.set()  # the client left: stop at the next step

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get("/api/runs")
    def run_list() -> list[dict[str, Any]]:
        summaries = []
        for index, run in enumerate(runs):
            try:
                summaries.append({"index": index, **run.summary()})
            except LightLLMError as exc:  # one run's trouble leaves the others shown
                summaries.append({"index": index, "name": run.name, "warning": str(exc)})
        if explorer.run_folder is not None and summaries[0].get("warning") is None:
            summaries[0]["warning"] = explorer.curves_warning()
        return summaries

    @app.get("/api/runs/{index}/probes/{iteration}")
    def run_probe(index: WholeNumber, iteration: WholeNumber) -> dict[str, Any]:
        index, iteration = int(index), int(iteration)
        if not 0 <= index < len(runs):
            return JSONResponse({"detail": f"there is no run {index}."}, status_code=404)
        try:
            return runs[index].probe(iteration)
        except UnknownRecord as exc:
            return JSONResponse({"detail": str(exc)}, status_code=404)
        except CheckpointError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.get("/api/explain")
    def explain_list() -> list[dict[str, str]]:
        return [{"name": n, "summary": explain.get(n).summary} for n in explain.names()]

    @app.get("/api/explain/{name}")
    def explain_example(name: str) -> dict[str, Any]:
        try:
            explain.get(name)
        except ConfigError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=404)
        return example_document(name, figures)

    @app.get("/api/explain/{name}/figures/{file}")
    def explain_figure(name: str, file: str) -> FileResponse:
        try:
            drawn = figures.names(name)
        except ConfigError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=404)
        if file not in drawn:
            return JSONResponse(
                {"detail": f"the {name} example has no picture {file!r}."}, status_code=404
            )
        return FileResponse(figures.folder / name / file, media_type="image/png")

    return app
