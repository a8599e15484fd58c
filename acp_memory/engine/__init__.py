"""The ReAct turn engine and the prompt it builds."""
