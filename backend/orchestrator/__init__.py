"""Sessions and turns: prompt admission, agent dispatch, agent output and turn completion."""
