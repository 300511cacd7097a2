// Placeholder until the App Store client issue fills this module in.
import Foundation
