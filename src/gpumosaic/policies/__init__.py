"""How much: allocation policies over jobs x GPU types, and queue orders."""
