"""The explorer: ``light-llm serve``, a local web page that shows a model thinking.

>>> from light_llm.serve import ExplorerModel, create_app
>>> app = create_app(ExplorerModel("out-light-llm", "my run"))   # a FastAPI application

session.py     the model served and every number the page shows
app.py         the FastAPI application: the page and the JSON API under /api
discovery.py   which model to serve when none is named
static/        the page: HTML, script and style (no CDN; it works offline)
"""

from light_llm.serve.app import create_app
from light_llm.serve.discovery import default_model, newest_run
from light_llm.serve.session import ExplorerModel, NotForThisModel, RequestError

__all__ = [
    "ExplorerModel",
    "NotForThisModel",
    "RequestError",
    "create_app",
    "default_model",
    "newest_run",
]
