"""An app pausepoint refuses as it is imported: its agent names a model no plugin serves."""

from pausepoint import Pausepoint

ai = Pausepoint()
agent = ai.define_agent(name="u", model="nosuchprovider/x")
