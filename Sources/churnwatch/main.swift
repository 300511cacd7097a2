print("churnwatch")
