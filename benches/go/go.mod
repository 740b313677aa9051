module stashpool/benches/go

go 1.19
