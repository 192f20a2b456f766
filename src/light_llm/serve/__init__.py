"""The explorer: ``light-llm serve``, a local web page that shows a model thinking.

>>> from light_llm.serve import ExplorerModel, create_app
>>> app = create_app(ExplorerModel("out-light-llm", "my run"))   # a FastAPI application

session.py     the model served and every number the page shows
inspection.py  the numbers of the "look inside" panels (light_llm.inspect on that model)
app.py         the FastAPI application: the page and the JSON API under /api
inspect_api.py the look-inside endpoints under /api/inspect
fields.py      what every request body shares
static/        the page: HTML, script (explorer.js, inspect.js) and style (no CDN; offline)
"""

from light_llm.checkpoints.discovery import default_model, newest_run
from light_llm.serve.app import create_app
from light_llm.serve.session import ExplorerModel, NotForThisModel, RequestError

__all__ = [
    "ExplorerModel",
    "NotForThisModel",
    "RequestError",
    "create_app",
    "default_model",
    "newest_run",
]
