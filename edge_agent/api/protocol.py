"""The OpenAI-compatible protocol models, re-exported: they live in edge_agent.services.protocol and (the Responses
API's) edge_agent.services.responses_protocol; edit them there.

jobs/ (OpenAI batch files) validates each request line with the same models as the live routes, and jobs
may not import api, so the models sit one layer down.
"""
from edge_agent.services.protocol import *  # noqa: F401,F403
from edge_agent.services.responses_protocol import *  # noqa: F401,F403
from edge_agent.services.protocol import _Request, _Sampling, _integral  # noqa: F401
