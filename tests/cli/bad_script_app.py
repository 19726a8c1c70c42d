"""An app whose test model's script holds no step: refused as it is imported."""

from pausepoint import Pausepoint
from pausepoint.testing import ScriptedModel

ai = Pausepoint()
agent = ai.define_agent(name="s", model=ScriptedModel([42]))
