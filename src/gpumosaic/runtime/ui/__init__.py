"""The page machinery of the live web views (``/ui``): one self-contained page per
service (no CDN: CSS and JavaScript ship in ``assets/`` and are inlined), fed by a
Server-Sent Events stream of changes (``stream.Feed``). Each service brings its own view
(the rounds' and Gandiva's in their mechanism packages, the extender's and the share
daemon's beside their applications)."""
