module golang.org/x/crypto

go 1.26.0

require (
	golang.org/x/net v0.62.0 // tagx:ignore
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require golang.org/x/text v0.44.0 // indirect
