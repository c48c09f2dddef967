"""Function tools: a request's definitions, the one reader of a tool run's text, OpenAI's call shapes."""
