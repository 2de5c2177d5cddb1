"""Front ends for people: terminal play, game replay checks, animations, narration and the browser
app."""
