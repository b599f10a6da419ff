"""Each module here exports `router` (an APIRouter with its own tag); app.api includes them all."""
